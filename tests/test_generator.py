import pytest

from dfsu.pii.generator import TEMPLATES, build_swap_pool, generate_records, template_labels
from dfsu.pii.records import LABELS_200K

LOCALES = ["en_US", "en_GB", "de_DE", "fr_FR"]
REQUIRED = {
    "FIRSTNAME",
    "LASTNAME",
    "EMAIL",
    "PHONENUMBER",
    "IPV4",
    "IPV6",
    "USERAGENT",
    "STREET",
    "CITY",
    "SSN",
    "IBAN",
    "CREDITCARDNUMBER",
    "DATE",
    "URL",
    "USERNAME",
    "ACCOUNTNUMBER",
}


def test_templates_and_labels_cover_the_200k_set():
    assert len(TEMPLATES) >= 25
    labels = template_labels()
    assert len(labels) >= 15 and labels >= REQUIRED and labels <= LABELS_200K


def test_offsets_exact_and_same_seed_same_records():
    a = generate_records(120, seed=3, locales=LOCALES)
    b = generate_records(120, seed=3, locales=LOCALES)
    assert [r.to_dict() for r in a] == [r.to_dict() for r in b]
    assert [r.to_dict() for r in generate_records(120, seed=4, locales=LOCALES)] != [
        r.to_dict() for r in a
    ]
    for r in a:
        assert r.spans and all(r.text[s.start : s.end] == s.value for s in r.spans)
        assert all("\n" not in s.value for s in r.spans)
    assert {r.meta["template"] for r in a} == set(TEMPLATES)


def test_prefixes_before_the_first_entity_are_distinct():
    records = generate_records(300, seed=0, locales=LOCALES)
    prefixes = [r.prefix() for r in records]
    assert len(set(prefixes)) == len(prefixes)


def test_swap_pool_is_disjoint_from_private_values():
    private = generate_records(200, seed=0, locales=LOCALES)
    pool = build_swap_pool(private, per_label=40, seed=0, locales=LOCALES)
    private_values = {s.value for r in private for s in r.spans}
    assert set(pool) == {s.label for r in private for s in r.spans}
    for label, values in pool.items():
        assert values, label
        assert not set(values) & private_values, label
        assert len(set(values)) == len(values)


def test_generated_records_do_not_depend_on_the_clock(monkeypatch):
    import datetime as real

    import faker.providers.date_time as faker_dates

    from dfsu.pii.generator import generate_records

    locales = ["en_US", "en_GB", "de_DE", "fr_FR"]
    today = [r.to_dict() for r in generate_records(200, seed=0, locales=locales)]

    class Later(real.datetime):
        @classmethod
        def now(cls, tz=None):
            return real.datetime(2031, 6, 1, 12, 34, tzinfo=tz)

    monkeypatch.setattr(faker_dates, "datetime", Later)
    later = [r.to_dict() for r in generate_records(200, seed=0, locales=locales)]
    assert later == today


def test_ssns_of_clock_dependent_locales_never_read_the_clock(monkeypatch):
    # Faker's pl_PL and sv_SE SSNs are drawn relative to the current time: a generated record
    # (and the tagger trained on such records) would depend on when it was made.
    import random
    import re

    from faker.providers.ssn.pl_PL import Provider as Polish
    from faker.providers.ssn.sv_SE import Provider as Swedish

    from dfsu.pii.generator import CLOCK_SSN, _fakers, _luhn_digit, make_value

    def clock(*args, **kwargs):
        raise AssertionError("a clock-dependent Faker ssn() was called")

    monkeypatch.setattr(Polish, "ssn", clock)
    monkeypatch.setattr(Swedish, "ssn", clock)
    for locale in CLOCK_SSN:
        runs = []
        for _ in range(2):
            ((_, fake),) = _fakers([locale], 7)
            rng = random.Random(1)
            runs.append([make_value("SSN", fake, rng) for _ in range(50)])
        assert runs[0] == runs[1]  # a seed, one set of values
        for value in runs[0]:
            if locale == "sv_SE":
                assert re.fullmatch(r"\d{6}-\d{4}", value)
                digits = value.replace("-", "")
                assert _luhn_digit(digits[:-1]) == digits[-1]
            else:
                assert re.fullmatch(r"\d{11}", value)
                weights = (1, 3, 7, 9, 1, 3, 7, 9, 1, 3)
                total = sum(int(c) * w for c, w in zip(value, weights, strict=False))
                assert (10 - total % 10) % 10 == int(value[-1])
    assert _luhn_digit("7992739871") == "3"  # the textbook example


def test_usable_templates_is_the_one_filter_and_names_its_setting():
    from dfsu.errors import DfsuError
    from dfsu.pii.generator import usable_templates

    templates = {"a": "mail {EMAIL} now", "b": "{FIRSTNAME} from {IPV4}"}
    assert usable_templates(templates, {"EMAIL": ["x@y.org"], "IPV4": []}) == {"a": templates["a"]}
    with pytest.raises(DfsuError, match="^leak: the swap pool holds no values"):
        usable_templates(templates, {"IPV4": ["1.2.3.4"]}, "leak")
