"""faultloop: inject real faults into distributed training and score the attribution tools."""

__version__ = "0.1.0"
