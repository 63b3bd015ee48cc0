"""PII records and spans, in the AI4Privacy pii-masking-200k shape."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The label set of ai4privacy/pii-masking-200k.
LABELS_200K = frozenset(
    """ACCOUNTNAME ACCOUNTNUMBER AGE AMOUNT BIC BITCOINADDRESS BUILDINGNUMBER CITY COMPANYNAME
    COUNTY CREDITCARDCVV CREDITCARDISSUER CREDITCARDNUMBER CURRENCY CURRENCYCODE CURRENCYNAME
    CURRENCYSYMBOL DATE DOB EMAIL ETHEREUMADDRESS EYECOLOR FIRSTNAME GENDER HEIGHT IBAN IP IPV4
    IPV6 JOBAREA JOBTITLE JOBTYPE LASTNAME LITECOINADDRESS MAC MASKEDNUMBER MIDDLENAME
    NEARBYGPSCOORDINATE ORDINALDIRECTION PASSWORD PHONEIMEI PHONENUMBER PIN PREFIX
    SECONDARYADDRESS SEX SSN STATE STREET TIME URL USERAGENT USERNAME VEHICLEVIN VEHICLEVRM
    ZIPCODE""".split()
)

# Labels of the 300k/400k/500k sets mapped onto the 200k names (the rest are kept as they are).
LABEL_ALIASES = {
    "GIVENNAME": "FIRSTNAME",
    "GIVENNAME1": "FIRSTNAME",
    "SURNAME": "LASTNAME",
    "LASTNAME1": "LASTNAME",
    "TELEPHONENUM": "PHONENUMBER",
    "TEL": "PHONENUMBER",
    "EMAILADDRESS": "EMAIL",
    "CREDITCARD": "CREDITCARDNUMBER",
    "SOCIALNUM": "SSN",
    "IDCARDNUM": "SSN",
    "ZIPCODE": "ZIPCODE",
    "POSTCODE": "ZIPCODE",
    "BUILDINGNUM": "BUILDINGNUMBER",
    "USERNAME": "USERNAME",
    "ACCOUNTNUM": "ACCOUNTNUMBER",
    "DATEOFBIRTH": "DOB",
    "BOD": "DOB",
    "IPADDRESS": "IP",
}


def canonical_label(label: str) -> str:
    """The 200k name of a label from any AI4Privacy release (unknown labels pass through)."""
    upper = label.strip().upper()
    return LABEL_ALIASES.get(upper, upper)


@dataclass(frozen=True)
class Span:
    value: str
    start: int
    end: int
    label: str

    def to_dict(self) -> dict[str, Any]:
        return {"value": self.value, "start": self.start, "end": self.end, "label": self.label}


@dataclass
class PiiRecord:
    """One text with its PII spans (character offsets, sorted by start)."""

    id: str
    text: str
    spans: list[Span]
    meta: dict[str, Any] = field(default_factory=dict)

    def first_span(self) -> Span:
        return min(self.spans, key=lambda s: s.start)

    def prefix(self) -> str:
        """The text before the first entity: what the memorization probe prompts with."""
        return self.text[: self.first_span().start]

    def to_dict(self) -> dict[str, Any]:
        row = {
            "id": self.id,
            "source_text": self.text,
            "privacy_mask": [s.to_dict() for s in self.spans],
        }
        row.update(self.meta)
        return row


def span_problem(text: str, span: Span) -> str | None:
    """Why a span does not fit its text, or None when it does."""
    if not (0 <= span.start < span.end <= len(text)):
        return (
            f"span {span.label} [{span.start}:{span.end}] is out of the text (length {len(text)})"
        )
    if text[span.start : span.end] != span.value:
        # Where and what kind, never the values themselves: the file holds PII.
        where = f"span {span.label} [{span.start}:{span.end}]"
        return f"{where}: the text there differs from the span's value ({len(span.value)} chars)"
    return None
