"""Interoperability: importers that write SkriptND model folders, exporters to other formats."""
