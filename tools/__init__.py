"""Development tooling behind the PDM scripts; not part of the installed distribution."""
