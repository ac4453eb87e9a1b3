"""perfci's own JSON document as an input format, so that any tool can feed perfci."""
