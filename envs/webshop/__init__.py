"""WebShop: a text shopping environment on the original WebShop data format, with exact snapshot/restore."""

from envs.webshop.env import WebShopEnv

__all__ = ["WebShopEnv"]
