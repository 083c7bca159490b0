from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path

urlpatterns = [
    path("chat/", include("chat.urls")),
    path("accounts/login/", auth_views.LoginView.as_view(), name="login"),
    path("presence/", include("presence_app.urls")),  # the SSE fallback and the JSON API
    path("admin/", admin.site.urls),
]
