"""The JSON API: ``path("presence/", include("presence_app.urls"))`` in the project's urls."""

from django.urls import path

from .realtime import htmx, rest, sse
from .web import api

app_name = "presence_app"

urlpatterns = [
    path("api/users/", api.users, name="api-users"),
    path("api/online/", api.online, name="api-online"),
    path("api/privacy/", api.privacy, name="api-privacy"),
    path("api/rooms/<str:room>/", api.room, name="api-room"),
    path("api/rooms/<str:room>/members/", api.room_roster, name="api-room-members"),
    path("api/rooms/<str:room>/names/", api.room_names, name="api-room-names"),
    path("api/stream/<str:frame_type>/", rest.command, name="api-stream"),
    path("sse/", sse.stream, name="sse"),
    path("sse/html/", htmx.stream, name="sse-html"),  # HTML events for htmx pages
]
