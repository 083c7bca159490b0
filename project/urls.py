from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.contrib.staticfiles.urls import staticfiles_urlpatterns
from django.urls import include, path

from project.demo.users import ADMIN, DEMO_PASSWORD, DEMO_USERS

# The login page lists the demo's users (it is a demo: their passwords are in the README).
login = auth_views.LoginView.as_view(
    redirect_authenticated_user=True,
    extra_context={"demo_users": DEMO_USERS, "demo_password": DEMO_PASSWORD, "demo_admin": ADMIN},
)

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/login/", login, name="login"),
    path("accounts/", include("django.contrib.auth.urls")),
    path("presence/", include("presence_app.urls")),
    path("", include("project.demo.urls")),
]

# Static files (presence.js, the CSS, the admin's) under uvicorn/daphne when DEBUG is on, as
# runserver would; a production site serves them with its web server or WhiteNoise.
urlpatterns += staticfiles_urlpatterns()
