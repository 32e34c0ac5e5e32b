"""The multi-turn environment agent loop that collects ProVer's rollouts, proposals and verifications."""
