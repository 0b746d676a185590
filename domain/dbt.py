"""A dbt project as far as lineage needs it: where models, seeds and macros live, which file
defines which model, and the names models are materialised under (pure, no I/O).

Model names are file stems (``models/marts/fct_orders.sql`` -> ``fct_orders``). The relation a
``ref()`` stands for is the model's ``alias`` when one is configured (in the model's
``{{ config(alias=...) }}``, in a properties YAML ``config: {alias: ...}``, or folder-wide in
``dbt_project.yml``), else its name; relation names are lower-cased, like the unquoted names
the SQL extractor reports, so ``ref('stg_orders')`` and ``select ... from stg_orders`` meet on
one dataset node.
"""

from __future__ import annotations

import posixpath
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

from domain import dbt_yaml
from domain.dbt_jinja import parse_config, scan_jinja

PROJECT_FILE = "dbt_project.yml"
_MODEL_EXTENSIONS = (".sql", ".py")
_SEED_EXTENSIONS = (".csv",)
_YAML_EXTENSIONS = (".yml", ".yaml")
# Directories of installed packages and build output: never part of the project itself.
_IGNORED_DIRS = frozenset({"dbt_packages", "dbt_modules", "target", "logs", ".venv", "venv"})


def _empty() -> Mapping[str, Any]:
    return MappingProxyType({})


def _frozen(data: Mapping[str, Any]) -> Mapping[str, Any]:
    return MappingProxyType(dict(data))


@dataclass(frozen=True)
class DbtProject:
    """One dbt project of a repository; paths are repository-relative, POSIX style."""

    name: str
    root: str = ""  # the folder holding dbt_project.yml ("" = repository root)
    model_paths: tuple[str, ...] = ("models",)
    seed_paths: tuple[str, ...] = ("seeds",)
    macro_paths: tuple[str, ...] = ("macros",)
    snapshot_paths: tuple[str, ...] = ("snapshots",)
    models: Mapping[str, str] = field(default_factory=_empty, hash=False)  # model name -> file path
    seeds: Mapping[str, str] = field(default_factory=_empty, hash=False)  # seed name -> file path
    aliases: Mapping[str, str] = field(default_factory=_empty, hash=False)  # model name -> alias
    folder_config: Mapping[str, Any] = field(default_factory=_empty, hash=False)  # `models:` tree
    warnings: tuple[str, ...] = ()

    # -- building -------------------------------------------------------------------------

    @classmethod
    def from_files(cls, files: Mapping[str, str], root: str | None = None) -> DbtProject:
        """Build the project from a repository's paths (keys) and the contents known (values;
        "" when not read). ``dbt_project.yml``'s content is needed; model and properties YAML
        contents are optional and only used to learn aliases and snapshot names.

        ``root`` is the folder of ``dbt_project.yml``; by default the shallowest one found.

        Raises:
            ValueError: when no ``dbt_project.yml`` is among the paths.
        """
        paths = {_normal(path): content for path, content in files.items()}
        if root is None:
            candidates = sorted(
                (path for path in paths if posixpath.basename(path) == PROJECT_FILE),
                key=lambda path: (path.count("/"), path),
            )
            candidates = [path for path in candidates if not _ignored(path, "")] or candidates
            if not candidates:
                raise ValueError(f"no {PROJECT_FILE} among the files")
            root = posixpath.dirname(candidates[0])
        root = _normal(root)
        project_file = posixpath.join(root, PROJECT_FILE) if root else PROJECT_FILE
        if project_file not in paths:
            raise ValueError(f"no {project_file} among the files")
        return _Builder(paths, root, paths[project_file]).build()

    # -- questions ------------------------------------------------------------------------

    def contains(self, path: str) -> bool:
        """True for a path inside the project's folder (installed packages excluded)."""
        path = _normal(path)
        if self.root and not path.startswith(self.root + "/"):
            return False
        return not _ignored(path, self.root)

    def is_model_file(self, path: str) -> bool:
        """A ``.sql``/``.py`` file under one of the model paths."""
        return path.endswith(_MODEL_EXTENSIONS) and self._under(path, self.model_paths)

    def is_snapshot_file(self, path: str) -> bool:
        return path.endswith(".sql") and self._under(path, self.snapshot_paths)

    def is_macro_file(self, path: str) -> bool:
        return self._under(path, self.macro_paths)

    def is_seed_file(self, path: str) -> bool:
        return path.endswith(_SEED_EXTENSIONS) and self._under(path, self.seed_paths)

    def model_name_for(self, path: str) -> str | None:
        """The model a file defines (its stem), or None when it is not a model file."""
        if not self.is_model_file(path):
            return None
        return _stem(path)

    def seed_name_for(self, path: str) -> str | None:
        return _stem(path) if self.is_seed_file(path) else None

    def model_path(self, model: str) -> str | None:
        """The file defining a model (so a question about `fct_orders` finds its file)."""
        found = self.models.get(model)
        if found is not None:
            return found
        lowered = model.lower()
        for name, path in self.models.items():
            if name.lower() == lowered:
                return path
        return None

    def is_seed(self, name: str) -> bool:
        return name in self.seeds or name.lower() in {seed.lower() for seed in self.seeds}

    def relation_name(self, model: str) -> str:
        """The dataset name a ``ref(model)`` stands for: the model name, lower-cased.

        Not the alias: whether a ref knows the alias would depend on which files were ingested
        before it, and a model would split into two nodes. The alias is a node property."""
        return model.lower()

    def config_for(self, path: str) -> dict[str, Any]:
        """Folder-level configuration of a model file from ``dbt_project.yml`` (``+`` prefixes
        removed); the file's own ``config()`` overrides it."""
        relative = self._relative_to(path, self.model_paths)
        if relative is None:
            return {}
        tree = self.folder_config.get(self.name)
        found: dict[str, Any] = {}
        folders = relative.split("/")[:-1]
        for folder in [None, *folders]:
            if folder is not None:
                tree = tree.get(folder) if isinstance(tree, Mapping) else None
            if not isinstance(tree, Mapping):
                break
            found.update(_config_keys(tree))
        return found

    # -- helpers --------------------------------------------------------------------------

    def _full(self, folder: str) -> str:
        return posixpath.join(self.root, folder) if self.root else folder

    def _under(self, path: str, folders: tuple[str, ...]) -> bool:
        return self._relative_to(path, folders) is not None

    def _relative_to(self, path: str, folders: tuple[str, ...]) -> str | None:
        path = _normal(path)
        if not self.contains(path):
            return None
        for folder in folders:
            prefix = self._full(_normal(folder))
            if prefix in {"", "."}:
                return path[len(self.root) + 1 :] if self.root else path
            if path.startswith(prefix + "/"):
                return path[len(prefix) + 1 :]
        return None


def find_dbt_projects(paths: Iterable[str], read: Callable[[str], str]) -> list[DbtProject]:
    """Every dbt project of a repository (root or subfolders), outermost first.

    ``read`` returns a file's text; it is asked for each ``dbt_project.yml`` and for model,
    snapshot and properties YAML files (to learn aliases); a file it cannot read counts as
    empty.
    """
    all_paths = sorted({_normal(path) for path in paths})
    roots = sorted(
        {
            posixpath.dirname(path)
            for path in all_paths
            if posixpath.basename(path) == PROJECT_FILE and not _ignored(path, "")
        },
        key=lambda root: (root.count("/") if root else -1, root),
    )
    projects: list[DbtProject] = []
    for root in roots:
        inside = [path for path in all_paths if not root or path.startswith(root + "/")]
        # Files of a nested project belong to that project, not to this one.
        nested = [other for other in roots if other != root and _is_below(other, root)]
        inside = [path for path in inside if not any(_is_below(path, n) for n in nested)]
        project_file = posixpath.join(root, PROJECT_FILE) if root else PROJECT_FILE
        bare = DbtProject.from_files({project_file: _read(read, project_file)}, root)
        files: dict[str, str] = {}
        for path in inside:
            wanted = path == project_file or (
                (bare.is_model_file(path) and path.endswith(".sql"))
                or bare.is_snapshot_file(path)
                or (path.endswith(_YAML_EXTENSIONS) and bare._under(path, bare.model_paths))
            )
            files[path] = _read(read, path) if wanted else ""
        projects.append(DbtProject.from_files(files, root))
    return projects


def dbt_project_for(path: str, projects: Iterable[DbtProject]) -> DbtProject | None:
    """The innermost project containing a path."""
    best: DbtProject | None = None
    for project in projects:
        if project.contains(path) and (best is None or len(project.root) > len(best.root)):
            best = project
    return best


# -- building ---------------------------------------------------------------------------------


class _Builder:
    def __init__(self, files: dict[str, str], root: str, project_text: str) -> None:
        self.files = files
        self.root = root
        self.project_text = project_text
        self.warnings: list[str] = []

    def build(self) -> DbtProject:
        settings = self._settings()
        project = DbtProject(
            name=str(settings.get("name") or posixpath.basename(self.root) or "dbt_project"),
            root=self.root,
            model_paths=_paths(settings, "model-paths", "source-paths", default="models"),
            seed_paths=_paths(settings, "seed-paths", "data-paths", default="seeds"),
            macro_paths=_paths(settings, "macro-paths", default="macros"),
            snapshot_paths=_paths(settings, "snapshot-paths", default="snapshots"),
            folder_config=_frozen(
                settings["models"] if isinstance(settings.get("models"), dict) else {}
            ),
        )
        models: dict[str, str] = {}
        seeds: dict[str, str] = {}
        for path in sorted(self.files):
            name = project.model_name_for(path)
            if name is None and project.is_snapshot_file(path):
                name = scan_jinja(self.files[path], lambda call: "", "").snapshot
            if name is not None:
                if name in models and models[name] != path:
                    self.warnings.append(f"model {name!r} defined twice: {models[name]}, {path}")
                else:
                    models[name] = path
            seed = project.seed_name_for(path)
            if seed is not None:
                seeds.setdefault(seed, path)
        aliases = self._aliases(project, models)
        return DbtProject(
            name=project.name,
            root=project.root,
            model_paths=project.model_paths,
            seed_paths=project.seed_paths,
            macro_paths=project.macro_paths,
            snapshot_paths=project.snapshot_paths,
            models=_frozen(models),
            seeds=_frozen(seeds),
            aliases=_frozen(aliases),
            folder_config=project.folder_config,
            warnings=tuple(self.warnings),
        )

    def _settings(self) -> dict[str, Any]:
        try:
            node = dbt_yaml.compose(self.project_text)
        except dbt_yaml.YamlError as error:
            self.warnings.append(f"{PROJECT_FILE} is not valid YAML ({error}); defaults used")
            return {}
        data = dbt_yaml.value(node)
        return data if isinstance(data, dict) else {}

    def _aliases(self, project: DbtProject, models: dict[str, str]) -> dict[str, str]:
        """Aliases by precedence: folder config < properties YAML < the model's config()."""
        aliases: dict[str, str] = {}
        for name, path in models.items():
            alias = project.config_for(path).get("alias")
            if isinstance(alias, str) and alias:
                aliases[name] = alias
        for path, content in sorted(self.files.items()):
            if (
                content
                and path.endswith(_YAML_EXTENSIONS)
                and project._under(path, project.model_paths)
            ):
                aliases.update(_yaml_aliases(content))
        for name, path in models.items():
            content = self.files.get(path, "")
            if content and path.endswith(".sql") and "config" in content:
                alias = parse_config(content).get("alias")
                if isinstance(alias, str) and alias:
                    aliases[name] = alias
        return {name: alias for name, alias in aliases.items() if name in models}


def _yaml_aliases(text: str) -> dict[str, str]:
    try:
        root = dbt_yaml.compose(text)
    except dbt_yaml.YamlError:
        return {}
    found: dict[str, str] = {}
    for entry in dbt_yaml.seq(dbt_yaml.get(root, "models")):
        name = dbt_yaml.text(dbt_yaml.get(entry, "name"))
        alias = dbt_yaml.text(dbt_yaml.get(dbt_yaml.get(entry, "config"), "alias"))
        if name and alias:
            found[name] = alias
    return found


def _config_keys(tree: Mapping[str, Any]) -> dict[str, Any]:
    """Config entries of one level of a `models:` tree: `+key` always, bare keys when their
    value is not a nested folder."""
    found: dict[str, Any] = {}
    for key, item in tree.items():
        if key.startswith("+"):
            found[key[1:]] = item
        elif not isinstance(item, Mapping) and key in _CONFIG_KEYS:
            found[key] = item
    return found


_CONFIG_KEYS = frozenset(
    {
        "materialized",
        "schema",
        "database",
        "alias",
        "tags",
        "enabled",
        "unique_key",
        "incremental_strategy",
        "on_schema_change",
        "persist_docs",
        "full_refresh",
        "meta",
        "grants",
        "docs",
        "contract",
        "access",
        "group",
    }
)


def _paths(settings: Mapping[str, Any], *keys: str, default: str) -> tuple[str, ...]:
    for key in keys:
        item = settings.get(key)
        if isinstance(item, list) and all(isinstance(entry, str) for entry in item) and item:
            return tuple(_normal(entry) for entry in item)
        if isinstance(item, str) and item:
            return (_normal(item),)
    return (default,)


def _read(read: Callable[[str], str], path: str) -> str:
    try:
        return read(path)
    except (OSError, UnicodeDecodeError, ValueError, KeyError):
        return ""


def _normal(path: str) -> str:
    path = path.replace("\\", "/")
    while path.startswith("./"):
        path = path[2:]
    return path.strip("/")


def _stem(path: str) -> str:
    return posixpath.splitext(posixpath.basename(path))[0]


def _is_below(path: str, root: str) -> bool:
    return not root or path.startswith(root + "/")


def _ignored(path: str, root: str) -> bool:
    relative = path[len(root) + 1 :] if root and path.startswith(root + "/") else path
    parts = relative.split("/")
    return len(parts) > 1 and parts[0] in _IGNORED_DIRS
