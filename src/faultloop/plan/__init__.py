"""Planning: configuration, the pool, the artifact layout and what one invocation carries."""
