"""families.graph."""
