"""The Heron Instance: runs one spout or bolt task per process."""
