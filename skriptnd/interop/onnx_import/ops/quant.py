"""quant operators (see registry.FAMILIES)."""
