"""``Runner``: submit a streamlet computation (heronpy's ``Runner``). Driver only."""

from __future__ import annotations

from heron_spark.api.topology import TopologyBuilder
from heron_spark.errors import TopologyTypeError
from heron_spark.streamlet.builder import Builder
from heron_spark.streamlet.config import Config


class Runner:
    """Builds the topology of a ``Builder`` and submits it."""

    def run(self, name: str, config: Config, builder: Builder):
        """Submit ``builder``'s computation as topology ``name``; return its handle.

        Submit ``builder``'s computation as topology ``name`` through ``heron_spark.submit``
        (under ``heron-spark submit`` the CLI's flags apply and it waits; from plain Python
        this waits until the topology ends). Returns the topology's handle.
        """
        if not isinstance(name, str) or not name:
            msg = "Runner.run needs the topology's name (str)"
            raise TopologyTypeError(msg, value=name, fix="pass a name, e.g. sys.argv[1]")
        if not isinstance(config, Config):
            msg = "Runner.run takes a streamlet Config"
            raise TopologyTypeError(msg, value=config, fix="pass heron_spark.streamlet.Config()")
        if not isinstance(builder, Builder):
            msg = "Runner.run takes a streamlet Builder"
            raise TopologyTypeError(msg, value=builder, fix="pass the Builder the streamlets came from")
        bldr = builder.build(TopologyBuilder(name))
        bldr.set_config(config.as_dict())
        return bldr.build_and_submit()
