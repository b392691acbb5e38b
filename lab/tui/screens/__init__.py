"""Screens: the course map, a lesson, and small dialogs."""

from .dialogs import ConfirmScreen, HelpScreen, TooSmallScreen
from .home import HomeScreen
from .lesson import LessonScreen

__all__ = ["ConfirmScreen", "HelpScreen", "HomeScreen", "LessonScreen", "TooSmallScreen"]
