"""Widgets of the lab: each one shows data it is given (calls down) and posts messages up."""

from .category_bars import CategoryBars
from .code_view import CodeView
from .controls import RunControls
from .inspector import InspectorView
from .quiz import QuizView
from .results import ResultsData, ResultsView
from .timeline import Series, TimelinePlot

__all__ = ["CategoryBars", "CodeView", "InspectorView", "QuizView", "ResultsData", "ResultsView",
           "RunControls", "Series", "TimelinePlot"]
