"""heronpy.api.component: a package of heronpy's API (see the modules under it)."""
