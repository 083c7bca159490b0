from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from project.demo.users import ADMIN, DEMO_PASSWORD, DEMO_USERS


class Command(BaseCommand):
    help = "Creates the demo users (and an admin) if missing, and prints how to log in."

    def handle(self, *args, **options):
        User = get_user_model()
        for name in DEMO_USERS:
            if not User.objects.filter(username=name).exists():
                User.objects.create_user(name, password=DEMO_PASSWORD)
        name, password = ADMIN
        if not User.objects.filter(username=name).exists():
            User.objects.create_superuser(name, password=password)
        self.stdout.write(
            f"Demo users: {', '.join(DEMO_USERS)} (password: {DEMO_PASSWORD}); "
            f"admin dashboard: {name} / {password}"
        )
