"""Manual work no family can rewrite (NM9xx)."""
