"""recurrent operators (see registry.FAMILIES)."""
