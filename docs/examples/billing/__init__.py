"""A billing API of some age that validates with marshmallow and webargs (docs/existing-app.rst)."""
