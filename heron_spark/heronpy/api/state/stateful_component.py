"""heronpy.api.state.stateful_component: heronpy's path to ``heron_spark.api.state``."""

from heron_spark.api.state import StatefulComponent, TwoPhaseStatefulComponent  # noqa: F401
