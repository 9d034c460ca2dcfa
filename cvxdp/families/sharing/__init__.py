"""families.sharing."""
