from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand

from project.demo.users import ADMIN, DEMO_PASSWORD, DEMO_USERS, create_user, login_name


class Command(BaseCommand):
    help = "Creates the demo users (and an admin) if missing, and prints how to log in."

    def handle(self, *args, **options):
        User = get_user_model()

        def exists(name: str) -> bool:
            return User._default_manager.filter(**{User.USERNAME_FIELD: login_name(name)}).exists()

        for name in DEMO_USERS:
            if not exists(name):
                create_user(name, password=DEMO_PASSWORD)
        name, password = ADMIN
        if not exists(name):
            create_user(name, password=password, is_staff=True, is_superuser=True)
        self.stdout.write(
            f"Demo users: {', '.join(map(login_name, DEMO_USERS))} (password: {DEMO_PASSWORD}); "
            f"admin dashboard: {login_name(name)} / {password}"
        )
