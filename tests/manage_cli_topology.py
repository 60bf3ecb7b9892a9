"""``heron-spark submit [--deploy-deactivated] tests/manage_cli_topology.py NAME OUT``: the
activation test topology (``manage_topologies``), submitted as Heron's builder examples do."""

import sys
from pathlib import Path

import manage_topologies

manage_topologies.activation_builder(sys.argv[1], Path(sys.argv[2])).build_and_submit()
