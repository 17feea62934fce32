"""image operators (see registry.FAMILIES)."""
