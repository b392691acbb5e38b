"""Screens: the course map, a lesson, small dialogs (and, imported on demand, the playground
and the snapshot viewer)."""

from .dialogs import CalibrationScreen, ConfirmScreen, HelpScreen, PathPromptScreen, TooSmallScreen
from .home import HomeScreen
from .lesson import LessonScreen

__all__ = ["CalibrationScreen", "ConfirmScreen", "HelpScreen", "PathPromptScreen", "HomeScreen", "LessonScreen", "TooSmallScreen"]
