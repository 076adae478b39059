"""PyFlink functions that run agents on keyed streams."""
