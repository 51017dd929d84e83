"""The foundation every layer stands on: the artifact layout, atomic writes, the cell, the errors."""
