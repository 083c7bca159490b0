"""A URLconf that forgot ``include("presence_app.urls")`` (tests/test_checks.py)."""

from django.contrib import admin
from django.urls import path

urlpatterns = [path("admin/", admin.site.urls)]
