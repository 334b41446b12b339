"""Transfer task plugins: one class per task family (``base``), the tasks by name (``registry``)."""
