from django.urls import path

from . import views

app_name = "demo"

urlpatterns = [
    path("", views.room_list, name="room-list"),
    path("rooms/<slug:slug>/", views.room_detail, name="room"),
    path("htmx/<slug:slug>/", views.room_htmx, name="room-htmx"),
    path("who/<slug:slug>/", views.room_who, name="room-who"),
    path("notes/<slug:slug>/", views.note_detail, name="note"),
]
