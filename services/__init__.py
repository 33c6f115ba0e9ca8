"""Drydock services: one small package per service, each a plugin of `drydock serve`."""
