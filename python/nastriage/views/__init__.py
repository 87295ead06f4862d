"""Views of a :class:`nastriage.Capture`: JSON (``json_out``), terminal (``terminal``).

Submodules are imported on demand; nothing here imports pyarrow or rich.
"""
