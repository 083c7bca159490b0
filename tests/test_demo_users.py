import uuid
from io import StringIO

import pytest
from django.contrib.auth import authenticate, get_user_model
from django.core.management import call_command

from project.demo.users import ADMIN, DEMO_PASSWORD, DEMO_USERS, login_name


@pytest.mark.django_db
def test_demo_users_are_created_once_and_can_log_in():
    out = StringIO()
    call_command("demo_users", stdout=out)
    call_command("demo_users", stdout=StringIO())
    assert get_user_model().objects.count() == len(DEMO_USERS) + 1
    assert authenticate(username=login_name(DEMO_USERS[0]), password=DEMO_PASSWORD) is not None
    assert authenticate(username=login_name(ADMIN[0]), password=ADMIN[1]).is_superuser
    assert DEMO_PASSWORD in out.getvalue()


def test_avatar_hues_differ_for_uuid_users_too():
    from project.demo.templatetags.demo import avatar_hue

    assert avatar_hue(7) == (7 * 67 + 200) % 360
    hues = {avatar_hue(str(uuid.UUID(int=n * 7919 + 1))) for n in range(20)}
    assert len(hues) > 10 and all(0 <= h < 360 for h in hues)  # was 210 for every one
