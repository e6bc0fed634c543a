//! Agents: serving them (the agent host) and calling them, wire-compatible with the
//! reference's `agent_host.py` and `agent.py`.
