"""``tierra snapshot --kubeconfig FILE -o DIR``: dump a live cluster as snapshot files.

Writes what the scheduler reads (see ``tierra.kube.snapshot``) so that
``tierra schedule DIR/*.json`` replays the cluster offline. Exit status 0 on success, 2 when
the kubeconfig cannot be used, 1 when the API server refused or could not be reached.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from tierra.cli.scheduler import ContextOption, KubeconfigOption


def snapshot(  # typer options, keyword-only
    *,
    output: Annotated[Path, typer.Option("-o", "--output", help="Folder to write into.")],
    kubeconfig: KubeconfigOption = None,
    context: ContextOption = None,
    namespace: Annotated[
        str | None,
        typer.Option(
            "--namespace", "-n", help="Only this namespace's pods and PodGroups (default: all)."
        ),
    ] = None,
) -> None:
    """Dump Nodes, Pods, HyperNodes, PodGroups and Queues of a cluster as snapshot files."""
    import asyncio  # noqa: PLC0415 - keep --help fast

    from rich.progress import Progress, SpinnerColumn, TextColumn  # noqa: PLC0415

    from tierra.cli.common import console, err_console, fail  # noqa: PLC0415
    from tierra.kube.client import ApiError, Kube, KubeConfigError  # noqa: PLC0415
    from tierra.kube.snapshot import Written, dump  # noqa: PLC0415

    async def main() -> list[Written]:
        async with await Kube.connect(kubeconfig, context=context) as kube:
            with Progress(
                SpinnerColumn(),
                TextColumn("{task.description}"),
                console=err_console,
                transient=True,
            ) as bar:
                tasks: dict[str, object] = {}
                counts: dict[str, int] = {}

                def progress(name: str, n: int) -> None:
                    counts[name] = counts.get(name, 0) + n
                    if name not in tasks:
                        tasks[name] = bar.add_task(name)
                    bar.update(tasks[name], description=f"{name}: {counts[name]:,}")  # type: ignore[arg-type]

                return await dump(kube, output, namespace=namespace, progress=progress)

    try:
        written = asyncio.run(main())
    except KubeConfigError as exc:
        fail(str(exc))
    except ApiError as exc:
        err_console.print(f"[red]error:[/red] {exc}")
        raise typer.Exit(1) from None
    except OSError as exc:
        fail(f"{output}: {exc.strerror or exc}")
    for w in written:
        what = ", ".join(f"{n:,} {name}" for name, n in w.counts.items()) or "not served"
        console.print(f"{w.path}: {what}")
