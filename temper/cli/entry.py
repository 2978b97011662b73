"""The `temper` command's entry point (and `python -m temper`'s): the allocator first, before torch
is imported (temper/malloc.py: this may re-execute the process once), then the command line."""


def main() -> None:
    from temper.malloc import use_fast_allocator

    use_fast_allocator()
    from temper.cli.main import main as cli_main

    cli_main()
