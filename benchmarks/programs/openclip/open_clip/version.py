__version__ = "2.20.0"
