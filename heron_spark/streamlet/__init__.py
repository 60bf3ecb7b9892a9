"""The Streamlet API (heronpy's ``heronpy.streamlet``).

Functional operations on streams, compiled to ordinary spouts and bolts (see ``streamlet.py``).
Importing it starts nothing.
"""

from heron_spark.streamlet.builder import Builder
from heron_spark.streamlet.config import Config
from heron_spark.streamlet.context import Context
from heron_spark.streamlet.generator import Generator, Timestamped
from heron_spark.streamlet.resources import Resources
from heron_spark.streamlet.runner import Runner
from heron_spark.streamlet.streamlet import Streamlet
from heron_spark.streamlet.transformoperator import TransformOperator
from heron_spark.streamlet.window import KeyedWindow, Window
from heron_spark.streamlet.windowconfig import WindowConfig

__all__ = ["Builder", "Config", "Context", "Generator", "KeyedWindow", "Resources", "Runner",
           "Streamlet", "Timestamped", "TransformOperator", "Window", "WindowConfig"]
