"""families.consensus."""
