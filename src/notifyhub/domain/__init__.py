"""Value objects and enums shared by every layer; imports neither SQLAlchemy nor redis."""
