"""The multi-turn environment agent loop that collects ProVer's rollouts, proposals and verifications."""

# Name the agent loop is registered under (data rows' ``agent_name``).
AGENT_NAME = "prover_env_agent"
