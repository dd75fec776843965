"""A package whose kernel module uses relative imports."""
