from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.shortcuts import render


@login_required
def index(request):
    return render(request, "chat/index.html")


@login_required
def room(request, room_name):
    User = get_user_model()
    people = User._default_manager.filter(is_active=True).order_by(User.USERNAME_FIELD)
    return render(request, "chat/room.html", {"room_name": room_name, "people": people})
