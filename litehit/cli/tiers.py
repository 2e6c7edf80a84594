"""``litehit tiers`` (the split of a facts file across cache tiers) and ``litehit plan`` (the
cheapest tiers reaching a target): the same options and the same compute as the tiers and plan
jobs (litehit.jobs.tiers, litehit.jobs.plan), their documents published where ``-o`` says."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from litehit.capacity import UNITS_HELP, format_bytes
from litehit.cli.commands import COMMAND_HELP
from litehit.errors import QueryError
from litehit.tiers.config import TierError, parse_assignment, parse_capacity
from litehit.tiers.hardware import GPUS, LINKS

if TYPE_CHECKING:
    from litehit.jobs.facts_kind import DocumentKind

__all__ = ["add_parsers", "add_split_arguments", "split_options"]

_RATE_UNITS = {"b/s": 1.0, "kb/s": 1e3, "mb/s": 1e6, "gb/s": 1e9, "tb/s": 1e12, "kib/s": 2**10, "mib/s": 2**20,
               "gib/s": 2**30, "tib/s": 2**40, "gbit/s": 1e9 / 8, "gbps": 1e9 / 8}  # fmt: skip
_TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
_AMOUNT = re.compile(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?\d+)?)\s*([A-Za-z/]*)\s*")
_MODEL_FLAGS = {"active_params": "--active-params", "layers": "--layers", "heads": "--heads", "head_dim": "--head-dim"}


def _amount(text: str, units: dict[str, float], default: str, flag: str, what: str) -> float:
    match = _AMOUNT.fullmatch(text)
    unit = (match.group(2) if match else "").lower() or default
    if match is None or unit not in units:
        raise TierError(flag, f"{text!r} is not {what} ({', '.join(units)})")
    return float(match.group(1)) * units[unit]


def _model_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("prefill model (an estimate; every constant is printed)")
    g.add_argument("--model", help="a model preset (litehit models): its parameters, layers, heads")
    g.add_argument("--gpu", help="a GPU preset: " + ", ".join(x.name for x in GPUS))
    g.add_argument("--mfu", type=float, default=0.4, help="share of the dense BF16 peak prefill reaches (0.4)")
    g.add_argument("--overlap", action="store_true", help="loads pipelined layer by layer: max(compute, loads)")
    g.add_argument("--link", action="append", default=[], metavar="TIER=PRESET",
                   help="how a lower tier is read: " + ", ".join(x.name for x in LINKS)
                   + " (defaults: dram/cpu pcie-gen5, ssd/nvme nvme, remote/rdma rdma-400)")  # fmt: skip
    g.add_argument("--bandwidth", action="append", default=[], metavar="TIER=RATE", help="e.g. ssd=12GB/s")
    g.add_argument("--latency", action="append", default=[], metavar="TIER=TIME", help="per request, e.g. ssd=80us")
    g.add_argument("--peak-tflops", type=float, help="overrides the GPU's dense BF16 TFLOP/s")
    for name, flag in _MODEL_FLAGS.items():
        g.add_argument(flag, type=float, dest=name, help=f"overrides the model's {name.replace('_', ' ')}")
    g.add_argument("--gpu-memory-utilization", type=float, default=0.9,
                   help="share of the GPU's memory the server uses (for --tier hbm=spare; 0.9)")  # fmt: skip


def add_split_arguments(p: argparse.ArgumentParser) -> None:
    """--mode and the prefill model's flags (litehit tiers, plan, report)."""
    p.add_argument("--mode", choices=["exclusive", "inclusive"], default="exclusive",
                   help="exclusive: demote on evict, promote on hit (default); inclusive: every tier an LRU of all")  # fmt: skip
    _model_arguments(p)


def split_options(args: argparse.Namespace) -> Any:
    """The TiersOptions of a command line's --tier, --mode and model flags (QueryError naming the
    flag otherwise)."""
    from litehit.tiers.options import TiersOptions

    data = {"tiers": _tiers(args, prices=False), "mode": args.mode, "prefill": _prefill(args)}
    return _validated(TiersOptions, data, args)


def _common(p: argparse.ArgumentParser) -> None:
    p.add_argument("facts", type=Path, help="a litehit_facts.csv")
    add_split_arguments(p)
    p.add_argument("-o", "--output", type=Path, help="write the JSON document here (atomically)")
    p.add_argument("--plot", type=Path, help="draw it here (.png or .svg)")


def add_parsers(sub: Any) -> None:
    t = sub.add_parser(
        "tiers",
        help=COMMAND_HELP["tiers"],
        description=(
            "Split each lane's hits across cache tiers from the facts alone (one LRU order: a block's\n"
            "depth decides its tier). Capacities per instance: " + UNITS_HELP + "; inf for the last tier;\n"
            "spare for the first: the GPU memory the model's weights leave (--model, --gpu).\n\n"
            "  litehit tiers out/litehit_facts.csv --tier hbm=spare --tier dram=512GiB --tier ssd=4TiB \\\n"
            "      --model Llama-3.1-8B --gpu H100-SXM -o tiers.json"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    t.add_argument("--tier", action="append", required=True, metavar="NAME=CAP", help="a tier, first = HBM")
    t.add_argument("--config", type=Path, help="the replay config of the facts: per request category too")
    _common(t)
    t.set_defaults(func=_run_tiers)

    p = sub.add_parser(
        "plan",
        help=COMMAND_HELP["plan"],
        description=(
            "Search tier capacities (NAME=CAP fixed, NAME=MIN..MAX ranged) for the cheapest\n"
            "configuration reaching a target, and the frontier of cost against hit rate.\n\n"
            "  litehit plan out/litehit_facts.csv --tier hbm=30GiB --tier dram=0..2TiB --tier ssd=0..16TiB \\\n"
            "      --price dram=0.004 --price ssd=0.0002 --target-hit-rate 0.3 -o plan.json"
        ),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--tier", action="append", required=True, metavar="NAME=CAP|MIN..MAX", help="a tier, first = HBM")
    p.add_argument("--price", action="append", default=[], metavar="NAME=P", help="per GiB-hour (0 when not given)")
    target = p.add_mutually_exclusive_group()
    target.add_argument("--target-hit-rate", type=float, metavar="X", help="hit tokens / input tokens")
    target.add_argument("--target-prefill-saving", type=float, metavar="X", help="share of prefill GPU time saved")
    target.add_argument("--target-ttft", type=float, metavar="S", help="the prefill estimate at most S seconds")
    p.add_argument("--ttft-stat", choices=["mean", "p90"], default="mean", help="what --target-ttft bounds (mean)")
    p.add_argument("--gpu-price", type=float, metavar="P", help="per GPU-hour: the value of the time saved")
    _common(p)
    p.set_defaults(func=_run_plan)


def _assignments(values: list[str], flag: str, tiers: list[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for text in values:
        name, value = parse_assignment(text, flag)
        if name not in tiers:
            raise TierError(f"{flag} {name}", f"no tier named {name!r} (tiers: {', '.join(tiers)})")
        out[name] = value
    return out


def _tiers(args: argparse.Namespace, *, prices: bool) -> list[dict[str, Any]]:
    args.price = getattr(args, "price", [])
    given = [parse_assignment(text, "--tier") for text in args.tier]
    names = [name for name, _ in given]
    links = _assignments(args.link, "--link", names)
    rates = _assignments(args.bandwidth, "--bandwidth", names)
    times = _assignments(args.latency, "--latency", names)
    price = _assignments(args.price, "--price", names) if prices else {}
    tiers = []
    for name, capacity in given:
        tier: dict[str, Any] = {"name": name, "capacity": capacity}
        if name in links:
            tier["link"] = links[name]
        if name in rates:
            tier["bandwidth_bytes_per_s"] = _amount(rates[name], _RATE_UNITS, "b/s", f"--bandwidth {name}", "a rate")
        if name in times:
            tier["latency_s"] = _amount(times[name], _TIME_UNITS, "s", f"--latency {name}", "a time")
        if name in price:
            try:
                tier["price_per_gib_hour"] = float(price[name])
            except ValueError:
                raise TierError(f"--price {name}", f"{price[name]!r} is not a number") from None
        tiers.append(tier)
    return tiers


def _prefill(args: argparse.Namespace) -> dict[str, Any] | None:
    if args.model is None and args.gpu is None:
        return None
    if args.model is None or args.gpu is None:
        raise TierError("--model" if args.model is None else "--gpu", "the prefill model needs both --model and --gpu")
    out: dict[str, Any] = {"model": args.model, "gpu": args.gpu, "mfu": args.mfu, "overlap": args.overlap}
    out["gpu_memory_utilization"] = args.gpu_memory_utilization
    if args.peak_tflops is not None:
        out["peak_flops"] = args.peak_tflops * 1e12
    for name in _MODEL_FLAGS:
        if getattr(args, name) is not None:
            out[name] = getattr(args, name)
    return out


TARGET_FLAGS = {"hit_rate": "--target-hit-rate", "prefill_saving": "--target-prefill-saving", "ttft_s": "--target-ttft"}
TOP_FLAGS = {"tiers": "--tier", "gpu_price_per_hour": "--gpu-price"}


def _flag_of(loc: str, args: argparse.Namespace) -> str:
    """A field of the options (or a flag already), as the command line spells it."""
    if loc.startswith("-"):
        return loc
    names = [parse_assignment(text, "--tier")[0] for text in args.tier]
    match = re.match(r"tiers(?:\[|\.)(\d+)\]?\.?(\w*)", loc)
    if match:
        i, field = int(match.group(1)), match.group(2)
        name = names[i] if i < len(names) else "?"
        flag = {"link": "--link", "bandwidth_bytes_per_s": "--bandwidth", "latency_s": "--latency"}.get(field, "--tier")
        flag = {"price_per_gib_hour": "--price"}.get(field, flag)
        return f"{flag} {name}"
    if loc.startswith("prefill."):
        field = loc.removeprefix("prefill.")
        return {"peak_flops": "--peak-tflops"}.get(field, "--" + field.replace("_", "-"))
    if loc.startswith("target"):
        field = loc.removeprefix("target").lstrip(".")
        if field in TARGET_FLAGS:
            return TARGET_FLAGS[field]
        given = [
            flag for key, flag in TARGET_FLAGS.items() if getattr(args, flag[2:].replace("-", "_"), None) is not None
        ]
        return given[0] if len(given) == 1 else "--target-hit-rate"
    return TOP_FLAGS.get(loc, "--" + loc.replace("_", "-") if loc else "--tier")


def _validated(model: Any, data: dict[str, Any], args: argparse.Namespace) -> Any:
    from pydantic import ValidationError

    try:
        return model.model_validate(data)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            cause = (error.get("ctx") or {}).get("error")
            if isinstance(cause, TierError):
                lines.append(f"{_flag_of(cause.where, args)}: {cause.message}")
                continue
            loc = ".".join(f"[{p}]" if isinstance(p, int) else str(p) for p in error["loc"]).replace(".[", "[")
            lines.append(f"{_flag_of(loc, args)}: {error['msg']}")
        raise QueryError("; ".join(lines)) from None


def _run_document(kind: DocumentKind[Any], args: argparse.Namespace, options: Any, document: Any) -> dict[str, Any]:
    from litehit.cli.facts_input import check_facts_file
    from litehit.jobs.records import JobRecorder
    from litehit.lane_plots import check_plot_path

    if args.plot is not None:
        try:
            check_plot_path(args.plot)
        except ValueError as exc:
            raise TierError("--plot", str(exc)) from None
    spec = kind.spec_model.model_validate({**options.model_dump(mode="json"), "facts_path": str(args.facts.resolve())})
    with JobRecorder(kind.kind, spec.model_dump(mode="json"), detach=getattr(args, "detach_records", False)) as record:
        check_facts_file(args.facts)
        try:
            result: dict[str, Any] = document(spec)
        except TierError as exc:  # found in the facts: a capacity the lane's blocks make wrong
            raise QueryError(f"{_flag_of(exc.where, args)}: {exc.message}") from None
        if args.output is not None:
            kind.publish(result, args.output, plot=args.plot)
        elif args.plot is not None:
            kind.plot(result, args.plot)
        record.document_succeeded(result, str(args.output.resolve()) if args.output else None)
    return result


def _run_tiers(args: argparse.Namespace) -> int:
    from litehit.jobs.tiers import KIND, tiers_of
    from litehit.spec import load_replay_config

    options = split_options(args)
    runtime = load_replay_config(args.config) if args.config is not None else None
    document = _run_document(KIND, args, options, lambda spec: tiers_of(args.facts, options, runtime, []))
    print_tiers(document)
    if args.output is not None:
        print(f"tiers: {args.output}")
    return 0


def _run_plan(args: argparse.Namespace) -> int:
    from litehit.jobs.plan import KIND
    from litehit.tiers.lanes import load_lanes
    from litehit.tiers.options import PlanOptions
    from litehit.tiers.planner import plan_document

    target = {
        "hit_rate": args.target_hit_rate,
        "prefill_saving": args.target_prefill_saving,
        "ttft_s": args.target_ttft,
    }
    data = {
        "tiers": _tiers(args, prices=True),
        "mode": args.mode,
        "prefill": _prefill(args),
        "target": {k: v for k, v in target.items() if v is not None},
        "ttft_stat": args.ttft_stat,
        "gpu_price_per_hour": args.gpu_price,
    }
    options = _validated(PlanOptions, data, args)
    document = _run_document(
        KIND, args, options, lambda spec: plan_document(load_lanes(args.facts, byte_steps=True), options)
    )
    print_plan(document)
    if args.output is not None:
        print(f"plan: {args.output}")
    return 0


def _percent(x: float) -> str:
    return f"{x:.2%}"


def _seconds(x: float | None) -> str:
    return "-" if x is None else f"{x:.3g} s"


def print_constants(constants: dict[str, Any], out: Any) -> None:
    if not constants.get("model"):
        return
    c = constants
    out.write(
        f"prefill model (an estimate, not a measurement): {c['model']} ({c['active_params']:.4g} active parameters, "
        f"{c['layers']} layers, {c['heads']} heads x {c['head_dim']}), {c['gpu']} {c['peak_flops'] / 1e12:g} TFLOP/s "
        f"x mfu {c['mfu']:g}{', overlapped loads' if c['overlap'] else ''}\n"
    )
    for name, link in c["links"].items():
        out.write(
            f"  {name}: {link['link']}, {link['bandwidth_bytes_per_s'] / 1e9:.4g} GB/s, "
            f"{link['latency_s'] * 1e6:g} us per request\n"
        )
    for name, spare in (c.get("spare") or {}).items():
        out.write(f"  {name} = spare: {format_bytes(spare['spare_bytes'])} ({spare['rule']})\n")


def print_tiers(document: dict[str, Any], out: Any = None) -> None:
    out = out or sys.stdout
    for lane in document["lanes"]:
        shape = (
            f"{lane['block_size']}-token blocks of {format_bytes(lane['block_bytes'])}"
            if lane["block_size"]
            else "mixed blocks"
        )
        if lane.get("hybrid"):
            shape = f"hybrid: {shape} and their states in one byte budget"
        out.write(
            f"lane {lane['lane']} ({lane['requests']:,} requests, {shape}): hit rate {_percent(lane['hit_rate'])} "
            f"({document['mode']})\n"
        )
        unit = "capacity" if lane.get("hybrid") else "blocks"
        out.write(f"  {'tier':<8}{unit:>12}{'hit rate':>10}{'cumulative':>12}{'loaded':>12}\n")
        for tier, given in zip(lane["tiers"], document["tiers"], strict=True):
            if tier["capacity_blocks"] is not None:
                blocks = f"{tier['capacity_blocks']:,}"
            elif given["capacity_bytes"] is not None:  # no block count: a hybrid or mixed lane's bytes
                blocks = format_bytes(given["capacity_bytes"])
            else:  # infinite, or blocks / tokens a mixed lane converts row by row
                blocks = "inf" if parse_capacity(given["capacity"], "tier").infinite else given["capacity"]
            out.write(
                f"  {tier['name']:<8}{blocks:>12}{_percent(tier['hit_rate']):>10}"
                f"{_percent(tier['cumulative_hit_rate']):>12}{format_bytes(tier['bytes_loaded']):>12}\n"
            )
        if "prefill_s" in lane:
            p = lane["prefill_s"]
            saved = "-" if p["saved_share"] is None else _percent(p["saved_share"])
            out.write(
                f"  prefill estimate: mean {_seconds(p['mean'])}, p50 {_seconds(p['p50'])}, p90 {_seconds(p['p90'])}, "
                f"p99 {_seconds(p['p99'])} (uncached mean {_seconds(p['uncached_mean'])}); GPU time saved {saved}\n"
            )
        for name, entry in lane["categories"].items():
            split = ", ".join(f"{t['name']} {_percent(t['hit_rate'])}" for t in entry["tiers"])
            out.write(f"  category {name}: {entry['requests']:,} requests, {_percent(entry['hit_rate'])} ({split})\n")
    print_constants(document["constants"], out)
    for note in document["notes"]:
        out.write(f"note: {note}\n")


def _configuration(c: dict[str, Any]) -> str:
    tiers = ", ".join(f"{t['name']} {t['capacity']}" for t in c["tiers"])
    text = f"{tiers}: hit rate {_percent(c['hit_rate'])}, cost {c['cost_per_hour']:.4g}/h"
    if c.get("prefill_s"):
        text += f", mean prefill estimate {_seconds(c['prefill_s']['mean'])}"
    if "net_per_hour" in c:
        text += f", net value {c['net_per_hour']:.4g}/h"
    return text


def print_plan(document: dict[str, Any], out: Any = None) -> None:
    out = out or sys.stdout
    for plan in document.get("lanes", [document]):
        out.write(f"lane {plan.get('lane', '')}:\n")
        if plan["best"] is not None:
            out.write(f"  best: {_configuration(plan['best'])}\n")
        elif "unreachable" in plan:
            out.write(f"  best: none ({plan['unreachable']})\n")
        if plan["frontier"]:
            out.write(
                f"  frontier: {len(plan['frontier'])} configurations, from {_configuration(plan['frontier'][0])}\n"
            )
        out.write(f"  searched: {plan['searched']}\n")
    print_constants(document["constants"], out)
