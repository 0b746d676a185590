"""Knowledge-graph enrichment: LLM-proposed lineage edges with provenance, verification against
the parser, review (accept/reject) and history. Pure: the policy that calls the models lives in
`projections/kg_enrichment.py`, the write side in `commands/kg.py`."""
