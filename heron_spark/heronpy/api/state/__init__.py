"""heronpy.api.state: state of stateful components."""
