//! Chat models: serving them (the model host) and calling them, wire-compatible with the
//! reference's `model_host.py` and `models.py`.
